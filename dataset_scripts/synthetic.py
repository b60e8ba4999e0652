"""Build and export the built-in synthetic chest X-ray dataset (no source files needed).

Example::

    python dataset_scripts/synthetic.py --out out/ --rows pairs --set n_images=200 --set seed=0

writes ``out/synthetic.parquet`` (PNG bytes embedded) and ``out/synthetic.build_report.json``.
The builder is :class:`shovir.data.synthetic.SyntheticCXR`; this file only forwards to
:func:`shovir.data.export.main`.
"""

from shovir.data.export import main

if __name__ == "__main__":
    raise SystemExit(main("synthetic"))
