"""The documentation stands alone and cannot go stale: every example output in the README and
docs/ is what the code prints now (scripts/docs_examples.py; the demo's is checked where the
demo's firmware is built, tests/test_pio_models.py), the README opens with the two commands CI
runs, and nothing points outside the repository."""
import re
import sys

from msf_pio.pio.project import REPO

sys.path.insert(0, str(REPO / "scripts"))
import docs_examples  # noqa: E402


def test_every_example_output_is_what_the_code_prints():
    assert docs_examples.stale(skip=("demo",)) == [], \
        "stale examples: run python scripts/docs_examples.py"


def test_every_document_has_examples_and_the_pictures_they_draw():
    examples = {p.relative_to(REPO).as_posix(): [a for a, _, _ in docs_examples.examples(p)]
                for p in docs_examples.documents()}
    assert "demo" in examples["README.md"] and len(sum(examples.values(), [])) >= 6
    for path in docs_examples.documents():
        for picture in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", path.read_text()):
            assert (path.parent / picture).is_file(), (path.name, picture)


def test_readme_opens_with_the_two_commands_ci_runs():
    text = (REPO / "README.md").read_text()
    first = re.search(r"^```sh\n(.*?)^```$", text, re.S | re.M)[1].splitlines()
    assert first == ["bash scripts/setup.sh && .venv/bin/msf-pio demo",
                     ".venv/bin/python -m pytest -q -n auto"]
    assert "bash -c \"${commands[0]}\"" in (REPO / ".ci" / "run").read_text()


def test_nothing_points_outside_the_repository():
    for path in docs_examples.documents():
        text = path.read_text()
        assert "../shared" not in text and "DESIGN.md" not in text, path.name
        for link in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
            if not link.startswith(("http://", "https://")):
                assert (path.parent / link).resolve().is_relative_to(REPO), (path.name, link)
