"""The notebook in notebooks/: well formed everywhere, executed end to end on a GPU."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def code_cells(path: Path) -> list[str]:
    notebook = json.loads(path.read_text())
    return ["".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            for cell in notebook["cells"] if cell["cell_type"] == "code"]


def test_there_is_a_notebook():
    assert [p.name for p in NOTEBOOKS] == ["ladders.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_well_formed(path):
    notebook = json.loads(path.read_text())
    assert notebook["nbformat"] == 4
    assert notebook["metadata"]["kernelspec"]["name"] == "python3"
    cells = code_cells(path)
    assert len(cells) >= 10
    for source in cells:
        ast.parse(source)  # plain Python, no shell escapes or magics
    text = "\n".join(cells)
    for call in ("describe(\"transpose\"", "describe(\"permute_dims\"", "describe(\"matmul\"",
                 "describe(\"sum\"", "describe(\"cumsum\"", "bench(\"transpose\"",
                 "bench(\"permute_dims\"", "bench(\"matmul\"", "bench(\"sum\"",
                 "bench(\"cumsum\"", ".plot()", "check("):
        assert call in text, call
    nbformat = pytest.importorskip("nbformat")
    nbformat.validate(nbformat.read(path, as_version=4))


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    pytest.importorskip("matplotlib")
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError, with the cell and traceback, on any error
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 3  # a plot per ladder
