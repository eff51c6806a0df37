"""P1, P2, min_latency, heuristic and the Pareto frontier against brute-force enumeration of
every path."""
import math
from fractions import Fraction

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msf_pio.fusion import bounds, latency, solvers
from msf_pio.fusion import graph as graph_module
from msf_pio.fusion.graph import build_graph
from msf_pio.model.spec import spec_to_model
from tests.random_models import small_specs


def all_paths(graph, cost=None):
    """(peak RAM, MACs) of every path from tensor 0 to the output, as a set: built node by node
    from every incoming edge and every (peak, MACs) of its source, nothing pruned (with parallel
    edges per cache scheme and tile height, listing the paths one by one takes minutes).
    `cost` (one number per edge) replaces the MACs."""
    cost = [e.macs for e in graph.edges] if cost is None else cost
    reach = {0: {(0, 0)}}
    for v in range(1, graph.n_nodes):
        reach[v] = {(max(peak, e.ram), total + c) for e, c in zip(graph.edges, cost)
                    if e.dst == v for peak, total in reach.get(e.src, ())}
    return reach[graph.output_node]


def check_min_latency(graph, pmaxes, board="qemu_f767zi"):
    """min_latency's plan is the least (predicted cycles, peak RAM) of every path within the
    limit, the cycles summed exactly (as fractions: the counts times the board's coefficients)."""
    coefficients = latency.profile(board)
    prices = [Fraction(coefficients.get(f, 0.0)) for f in latency.FEATURES]
    cost = [sum(int(n) * c for n, c in zip(row, prices))
            for row in latency.count_table(graph.model, graph.edges, coefficients.wide)]
    paths = all_paths(graph, cost)
    index = {id(e): k for k, e in enumerate(graph.edges)}
    for pmax in pmaxes:
        plan = solvers.min_latency(graph, pmax, board)
        ok = [(c, p) for p, c in paths if p <= pmax]
        assert plan.feasible == bool(ok)
        if ok:
            assert (sum(cost[index[id(e)]] for e in plan.blocks), plan.peak_ram) == min(ok)


def check_against_bruteforce(graph, fmaxes, pmaxes):
    paths = all_paths(graph)
    unfused = graph.unfused_macs
    for fmax in fmaxes:
        plan = solvers.p1_min_ram(graph, fmax)
        # a MAC-free model (pixel ops only) has F = 1, as Plan says
        ok = [p for p in paths if (p[1] / unfused if unfused else 1.0) <= fmax]
        assert plan.feasible == bool(ok)
        if ok:
            assert plan.peak_ram == min(p[0] for p in ok)
            assert plan.overhead <= fmax
    for pmax in pmaxes:
        plan = solvers.p2_min_macs(graph, pmax)
        ok = [p for p in paths if p[0] <= pmax]
        assert plan.feasible == bool(ok)
        if ok:
            best = min((p[1], p[0]) for p in ok)
            assert (plan.macs, plan.peak_ram) == best
    frontier = {p for p in paths
                if not any(q[0] <= p[0] and q[1] <= p[1] and q != p for q in paths)}
    assert {(p.peak_ram, p.macs) for p in solvers.pareto(graph)} == frontier
    # the heuristic: one edge from the input, then single layers
    singles = [graph.single_edge(i) for i in range(graph.model.n_layers)]
    heur = [(max([e.ram] + [s.ram for s in singles[e.dst:]]),
             e.macs + sum(s.macs for s in singles[e.dst:])) for e in graph.edges if e.src == 0]
    plan = solvers.heuristic(graph)
    assert (plan.peak_ram, plan.macs) == min(heur)
    vanilla = solvers.vanilla(graph)
    assert vanilla.macs == unfused and all(not e.fused for e in vanilla.blocks)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=small_specs(), fmax=st.floats(1.0, 3.0), data=st.data())
def test_exact_solvers_are_optimal(spec, fmax, data):
    graph = build_graph(spec_to_model(spec), "exact")
    rams = sorted({e.ram for e in graph.edges})
    pmaxes = [data.draw(st.sampled_from(rams)), data.draw(st.sampled_from(rams)) - 1, math.inf]
    check_against_bruteforce(graph, [fmax, 1.0, 1.25, math.inf], pmaxes)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=small_specs(max_layers=7), data=st.data())
def test_min_latency_is_optimal(spec, data):
    """(Smaller models: paths of exact cycles rarely coincide, so few merge as MACs do.)"""
    graph = build_graph(spec_to_model(spec), "exact")
    rams = sorted({e.ram for e in graph.edges})
    check_min_latency(graph, [data.draw(st.sampled_from(rams)), math.inf])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=small_specs(residuals=False, head=False), fmax=st.floats(1.0, 3.0), data=st.data())
def test_paper_solvers_are_optimal(spec, fmax, data):
    graph = build_graph(spec_to_model(spec), "paper")
    rams = sorted({e.ram for e in graph.edges})
    pmaxes = [data.draw(st.sampled_from(rams)), data.draw(st.sampled_from(rams)) + 1, math.inf]
    check_against_bruteforce(graph, [fmax, 1.1, math.inf], pmaxes)


def _same_plan(a, b):
    return a.feasible == b.feasible and [(e.first, e.last, e.scheme, e.tile_rows, e.ram, e.macs)
                                         for e in a.blocks] == \
        [(e.first, e.last, e.scheme, e.tile_rows, e.ram, e.macs) for e in b.blocks]


def check_capped_graphs(model, limits, board=None):
    """Every objective on the graph of the blocks it can use (bounds.py) gives the plan it
    gives on the whole graph, edge for edge; the capped graph is the whole one's edges up to
    the cap, in the same order."""
    requests = [("vanilla", {}), ("heuristic", {}), ("min_ram", {}),
                ("min_ram", {"max_overhead": 1.0}), ("min_ram", {"max_overhead": 1.3})] + \
        [("min_macs", {"ram_limit": r}) for r in limits] + \
        ([("min_latency", {"ram_limit": r, "board": board}) for r in limits] if board else [])
    def fresh(cap):
        graph_module.forget()          # no graph of a higher cap kept from before
        return build_graph(model, "exact", ram_cap=cap)

    singles = fresh(0)
    capped = {(o, opts.get("ram_limit")): fresh(bounds.ram_cap(singles, o, opts.get("ram_limit")))
              for o, opts in requests + [("pareto", {})]}
    full = fresh(math.inf)
    assert full.ram_cap == math.inf
    for (objective, limit), graph in capped.items():
        assert [e for e in full.edges if e.scheme == "single" or e.ram <= graph.ram_cap] == \
            graph.edges, objective
    for objective, opts in requests:
        ours = solvers.solve(capped[objective, opts.get("ram_limit")], objective, **opts)
        theirs = solvers.solve(full, objective, **opts)
        assert _same_plan(ours, theirs), (objective, opts)
        assert ours.predicted_instructions == theirs.predicted_instructions
    ours, theirs = solvers.pareto(capped["pareto", None]), solvers.pareto(full)
    assert len(ours) == len(theirs) and all(map(_same_plan, ours, theirs))
    return capped


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=small_specs(), data=st.data())
def test_capped_graph_plans_are_the_whole_graph_plans(spec, data):
    model = spec_to_model(spec)
    rams = sorted({e.ram for e in build_graph(model, "exact").edges})
    limits = [data.draw(st.sampled_from(rams)), math.inf]
    check_capped_graphs(model, limits, data.draw(st.sampled_from([None, "qemu_f767zi"])))


def test_the_cap_leaves_out_blocks():
    """On an inverted-residual chain most long blocks weigh more than the vanilla plan's peak:
    the graph of min_ram, min_macs and the frontier leaves them out, with the same plans."""
    model = spec_to_model({"name": "chain", "input": {"shape": [16, 16, 8]},
                           "weights": {"random": 1},
                           "layers": [{"op": "inverted_residual", "out": 8, "expand": 2,
                                       "kernel": 3, "stride": 1, "repeat": 12}]})
    assert bounds.fully_read(model)
    capped = check_capped_graphs(model, [20_000, math.inf])
    whole = len(build_graph(model, "exact").edges)
    assert len(capped["min_ram", None].edges) < whole * 3 / 4
    assert len(capped["vanilla", None].edges) == model.n_layers
