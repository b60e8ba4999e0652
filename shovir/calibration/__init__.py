"""Known-answer calibration: reference models with known behaviour, their fitting script, the
demo and the thresholds its verdict uses (shared by ``shovir demo`` and the tests).

* :mod:`shovir.calibration.reference` — the reference models (registered as
  ``reference-grounded``, ``reference-prior``, ``reference-context``);
* :mod:`shovir.calibration.fit` — reproduces their only fitted numbers
  (``python -m shovir.calibration.fit``);
* :mod:`shovir.calibration.checks` — the claims each reference model must pass, with thresholds;
* :mod:`shovir.calibration.demo` — ``shovir demo``.
"""
