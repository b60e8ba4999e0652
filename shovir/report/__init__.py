"""The paper's artefacts from a results document: tables (Markdown, LaTeX, CSV), figures, report.md.

* :mod:`shovir.report.tables` — each protocol's table from its declared columns;
* :mod:`shovir.report.figures` — ShoViR Fig. 2, 3a, 3b;
* :mod:`shovir.report.document` — results.json, tables, figures and report.md in one folder.

The report reads ``results.json`` only (through :class:`shovir.results.Results`).
"""

from shovir.report.document import summary_table, write_figures, write_report, write_tables
from shovir.report.tables import Cell, latex_escape, protocol_cells, protocol_rows, to_csv, to_latex, to_markdown

__all__ = ["Cell", "latex_escape", "protocol_cells", "protocol_rows", "summary_table", "to_csv", "to_latex", "to_markdown", "write_figures",
           "write_report", "write_tables"]
