"""Build the ModaLens-style MIMIC-CXR yes/no questions (13 findings + 1 composite per image) and export them.

Thin entry point around :class:`shovir.data.mimic_vqa.MimicVQA`; builder options pass as
``--set key=value``. Example (ShoViR metadata JSON, MIMIC-CXR-JPG ``files/`` as data dir)::

    python dataset_scripts/mimic_vqa.py --data-dir /data/mimic-cxr-jpg/2.1.0/files --out exports/mimic_vqa \\
        --set source=shovir_json --set annotation_file=/data/mimic_test_annotation.json --set uncertain=skip

With a manifest instead: ``--set source=jsonl --set annotation_file=cases.jsonl``.
"""

from shovir.data.export import main

if __name__ == "__main__":
    raise SystemExit(main("mimic_vqa"))
