"""Reports: merge cell results, classify, render, gate.

Reads only cell JSON (``matrix.cells.cell`` writes it; ``reports/cell.schema.json``
documents it) and never imports torch or the packages under test.
``reports.classify`` turns the evidence into zoo and guard states,
``reports.model`` assembles the report, ``reports.render`` holds one
renderer per format, ``reports.gate`` decides the exit code.
"""
