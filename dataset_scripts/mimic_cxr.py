"""Build the MIMIC-CXR (Chest ImaGenome boxes) dataset of shovir and export it.

Thin entry point around :class:`shovir.data.mimic_cxr.MimicCXR`; all logic lives in the library.

Usage::

    python dataset_scripts/mimic_cxr.py \\
        --data-dir /data/mimic-cxr-jpg/2.1.0/files \\
        --set metadata_file=/data/shovir/mimic_test_annotation.json \\
        --rows pairs --out exports/mimic_cxr
"""

from shovir.data.export import main

if __name__ == "__main__":
    raise SystemExit(main("mimic_cxr"))
