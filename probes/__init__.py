"""Probes that run inside one cell environment.

Everything under ``probes/`` executes with the cell's own interpreter, next to
the unsloth and unsloth_zoo builds under test. It may import only the standard
library, torch, and the packages under test -- never ``matrix`` or ``reports``
(the data flow is one-way: matrix -> cells -> probes -> cell JSON -> reports).
``python -m probes`` is the entry point; see ``probes.__main__``.
"""
