"""Build a medical VQA set (VQA-RAD, SLAKE, PMC-VQA, PathVQA or a JSONL manifest) and export it.

Thin entry point around :class:`shovir.data.vqa.MedicalVQA`; builder options pass as
``--set key=value``. Example (SLAKE 1.0, English questions of the test split)::

    python dataset_scripts/vqa.py --data-dir /data/Slake1.0 --out exports/slake \\
        --set format=slake --set annotation_file=test.json --set image_dir=imgs --set language=en

Other formats: ``--set format=vqa_rad --set "annotation_file=VQA_RAD Dataset Public.json"``,
``--set format=pmc_vqa --set annotation_file=test_clean.csv --set image_dir=images``,
``--set format=path_vqa --set "annotation_file=data/test-*.parquet"``.
"""

from shovir.data.export import main

if __name__ == "__main__":
    raise SystemExit(main("vqa"))
