"""Build the PadChest-GR dataset of shovir (findings mapped to CheXpert classes) and export it.

Thin entry point around :class:`shovir.data.padchest_gr.PadChestGR`; all logic lives in the library.

Usage::

    python dataset_scripts/padchest_gr.py \\
        --data-dir /data/PadChest-GR \\
        --set image_dir=/data/PadChest-GR/PadChest_GR \\
        --set verifier=mypackage.labelers:chexbert_codes \\
        --rows pairs --out exports/padchest_gr
"""

from shovir.data.export import main

if __name__ == "__main__":
    raise SystemExit(main("padchest_gr"))
