"""Tiny random models built offline, for tests and benchmarks (no weights are ever downloaded).

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> build_tiny_llava(folder)
>>> sorted(p.name for p in folder.iterdir() if p.suffix == ".json")[:2]
['config.json', 'generation_config.json']
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CHAT_TEMPLATE", "CORPUS", "build_tiny_llava"]

CORPUS = [
    "No acute cardiopulmonary process.",
    "There is a small left pleural effusion.",
    "The heart size is normal.",
    "yes no Radiology report : Is there an effusion ?",
]
CHAT_TEMPLATE = (
    "{% for m in messages %}{% if m['role'] == 'system' %}{{ m['content'][0]['text'] }} {% endif %}"
    "{% if m['role'] == 'user' %}{% for c in m['content'] %}{% if c['type'] == 'image' %}<image> "
    "{% elif c['type'] == 'text' %}{{ c['text'] }} {% endif %}{% endfor %}{% endif %}{% endfor %}"
)


def build_tiny_llava(folder: Path) -> None:
    """A 48k-parameter random LLaVA with a word-level tokenizer (hf_stack_offline.md §7)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        PreTrainedTokenizerFast,
    )

    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(CORPUS, trainers.WordLevelTrainer(special_tokens=["<pad>", "<unk>", "<s>", "</s>", "<image>"]))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", tok.token_to_id("<s>"))])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<pad>",
        extra_special_tokens={"image_token": "<image>"}, model_input_names=["input_ids", "attention_mask"],
    )
    image_processor = CLIPImageProcessor(
        size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}, do_center_crop=True, do_convert_rgb=True,
        image_mean=[0.5] * 3, image_std=[0.5] * 3,
    )
    vision = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                              image_size=32, patch_size=8, projection_dim=32)
    text = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
                       bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                       pad_token_id=tokenizer.pad_token_id)
    config = LlavaConfig(vision_config=vision, text_config=text, image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
                         image_seq_length=16, vision_feature_select_strategy="default", vision_feature_layer=-1)
    torch.manual_seed(0)
    model = LlavaForConditionalGeneration(config).eval()
    processor = LlavaProcessor(image_processor=image_processor, tokenizer=tokenizer, patch_size=8,
                               vision_feature_select_strategy="default", chat_template=CHAT_TEMPLATE,
                               image_token="<image>", num_additional_image_tokens=1)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
