"""Random small CNN specs for property-based tests (hypothesis strategies). Windows are square
or rectangular (each axis its own kernel and stride)."""
from hypothesis import strategies as st

from msf_pio.model.spec import spec_to_model


@st.composite
def small_specs(draw, max_layers: int = 10, residuals: bool = True, head: bool = True):
    """A random valid spec whose expanded IR has at most `max_layers` layers."""
    size = draw(st.integers(6, 20))
    layers, n, hw, c = [], 0, (size, size), draw(st.integers(1, 4))
    known = False                  # c is the current tensor's channels (not the input's yet)
    while n < max_layers:
        kind = draw(st.sampled_from(["conv", "dw", "pw", "pool", "ir", "act", "shortcut",
                                     "concat", "se", "slice", "up", "stop"]))
        if kind == "stop" and n >= 2:
            break
        if kind == "conv":
            k, s = draw(_window([1, 3, 5]))
            if not _fits(k, hw):
                continue
            c, known = draw(st.integers(1, 8)), True
            layers.append({"op": "conv2d", "out": c, "kernel": k, "stride": s,
                           "padding": draw(st.sampled_from(["same", "valid",
                                                            min(_pair(k)) // 2])),
                           "act": draw(st.sampled_from(["none", "relu", "relu6"]))})
            n += 1
        elif kind == "dw":
            k, s = draw(_window([3, 5]))
            if not _fits(k, hw):
                continue
            layers.append({"op": "depthwise_conv2d", "kernel": k, "stride": s, "act": "relu6"})
            n += 1
        elif kind == "pw":
            c, known = draw(st.integers(1, 8)), True
            layers.append({"op": "pointwise", "out": c})
            n += 1
        elif kind == "act":
            layers.append({"op": draw(st.sampled_from(["hard_swish", "leaky_relu", "logistic",
                                                       "softmax", "prelu"]))})
            n += 1
        elif kind == "pool" and min(hw) >= 2:
            k = draw(st.sampled_from([2, [2, 1], [1, 2], [3, 2], 3]))
            if not _fits(k, hw):
                continue
            op = draw(st.sampled_from(["max_pool", "avg_pool", "avg_pool_padded"]))
            if op == "avg_pool_padded":    # a PAD before TFLite's pool: padding taps count
                layers.append({"op": "avg_pool", "kernel": k, "stride": draw(st.sampled_from(
                    [1, 2])), "padding": min(_pair(k)) // 2, "count_pad": True})
            else:
                layers.append({"op": op, "kernel": k})
            n += 1
        elif kind == "se" and known and residuals and n + 5 <= max_layers:
            # squeeze-and-excite: the map times a gate of one value per channel
            x = len(layers) - 1
            layers += [{"op": "global_avgpool"},
                       {"op": "pointwise", "out": draw(st.integers(1, 3)), "act": "relu"},
                       {"op": "pointwise", "out": c}, {"op": "logistic"},
                       {"op": "mul", "input": x, "from": x + 4}]
            n += 5
        elif kind == "slice" and known and c >= 2:
            begin = draw(st.integers(0, c - 1))
            c = draw(st.integers(1, c - begin))
            layers.append({"op": "slice", "begin": begin, "out": c})
            n += 1
        elif kind == "up" and residuals and n >= 1 and n + 2 <= max_layers and max(hw) <= 8:
            # upsampling (a single-layer edge, or in a line-buffer block), then a pointwise
            # conv as a decoder has it
            if draw(st.booleans()):
                flag = draw(st.sampled_from(["half_pixel", "align_corners", None]))
                layers.append({"op": "resize_nearest", "scale": draw(st.sampled_from(
                    [2, [2, 1], [1, 2]])), **({flag: True} if flag else {})})
            else:
                layers.append({"op": "transpose_conv", "out": draw(st.integers(1, 6)),
                               "kernel": draw(st.sampled_from([1, 2, 3, [3, 2]])),
                               "stride": draw(st.sampled_from([2, [2, 1]])),
                               "padding": draw(st.sampled_from(["same", "valid"])),
                               "act": draw(st.sampled_from(["none", "relu"]))})
            c, known = draw(st.integers(1, 6)), True
            layers.append({"op": "pointwise", "out": c})
            n += 2
        elif kind == "ir" and residuals and n + 4 <= max_layers:
            layers.append({"op": "inverted_residual", "out": c, "expand": 2,
                           "kernel": 3, "stride": 1})
            n, known = n + 4, True
        elif kind == "shortcut" and residuals and n + 4 <= max_layers and min(hw) >= 3:
            # a ResNet stage: two 3x3 convs, a strided 1x1 conv shortcut on the stage input
            stage_in, s, c = len(layers) - 1 if layers else "input", \
                draw(st.sampled_from([1, 2])), draw(st.integers(1, 8))
            layers += [{"op": "conv2d", "out": c, "kernel": 3, "stride": s, "act": "relu"},
                       {"op": "conv2d", "out": c, "kernel": 3},
                       {"op": "pointwise", "out": c, "stride": s, "input": stage_in},
                       {"op": "add", "from": len(layers) + 1, "act": "relu"}]
            n, known = n + 4, True
        elif kind == "concat" and residuals and n + 3 <= max_layers and min(hw) >= 3:
            # two branches off one tensor, joined along the channels
            stage_in = len(layers) - 1 if layers else "input"
            layers += [{"op": "depthwise_conv2d", "kernel": 3, "act": "relu"},
                       {"op": "pointwise", "out": draw(st.integers(1, 4)), "input": stage_in},
                       {"op": "concat", "from": len(layers)}]
            c += layers[-2]["out"]
            n += 3
        else:
            continue
        hw = _dims(layers, size)
    if head and n + 2 <= max_layers and draw(st.booleans()):
        layers += [{"op": "global_avgpool"}, {"op": "dense", "out": 3}]
    return {"name": "random", "input": {"shape": [size, size, draw(st.integers(1, 3))]},
            "layers": layers}


@st.composite
def _window(draw, kernels: list[int]):
    """(kernel, stride) as the spec takes them: a square window, or a rectangular one with
    each axis drawn (a kernel of 1, 2 or one of `kernels`; a stride of 1 or 2)."""
    if draw(st.booleans()):
        return draw(st.sampled_from(kernels)), draw(st.sampled_from([1, 2]))
    sizes = sorted(set(kernels) | {1, 2})
    return ([draw(st.sampled_from(sizes)) for _ in range(2)],
            [draw(st.sampled_from([1, 2])) for _ in range(2)])


def _pair(k):
    return tuple(k) if isinstance(k, list) else (k, k)


def _fits(kernel, hw) -> bool:
    return all(k <= n for k, n in zip(_pair(kernel), hw))


def _dims(layers, size):
    return spec_to_model({"input": {"shape": [size, size, 1]},
                          "layers": layers}).output_shape[:2]
