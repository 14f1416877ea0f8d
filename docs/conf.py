"""Sphinx configuration of the skyjoin documentation.

Build: ``pip install '.[docs]' && sphinx-build -W -b html docs docs/_build/html``
(warnings are errors).  The API pages are generated from the docstrings
(autosummary + numpydoc); the guide and ``design.md`` are Markdown (MyST).
"""

from __future__ import annotations

import os
import sys

# Document the source tree even when skyjoin is not installed.
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "src")))

import skyjoin  # noqa: E402

project = "skyjoin"
author = "the skyjoin developers"
copyright = "2026, the skyjoin developers"
release = skyjoin.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "myst_parser",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
templates_path = ["_templates"]

# -- API reference ---------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = False
autodoc_typehints = "none"          # types are written in the numpydoc sections
autodoc_member_order = "bysource"
autodoc_mock_imports = ["cupy", "cupyx", "dask_cuda"]
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# -- Markdown ----------------------------------------------------------------
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3

# -- HTML --------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"skyjoin {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
html_static_path: list[str] = []
