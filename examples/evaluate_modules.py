"""The shovir metrics through Hugging Face `evaluate`, offline.

Run `shovir metrics install` once, then `python examples/evaluate_modules.py`.
"""

import evaluate

cardiomegaly = [0, 1] + [0] * 12   # 14 CheXpert codes: 0 blank, 1 positive, 2 negative, 3 uncertain
negated = [0, 2] + [0] * 12

flip_rate = evaluate.load("shovir/flip_rate")
print(flip_rate.compute(references=[cardiomegaly] * 2, control_predictions=[cardiomegaly] * 2,
                        predictions=[negated, cardiomegaly], target_classes=["Cardiomegaly"] * 2))

visual_reliance = evaluate.load("shovir/visual_reliance")
print(visual_reliance.compute(predictions_real=["yes", "no", "yes"], predictions_shuffled=["yes", "yes", "no"],
                              references=["yes", "no", "yes"], n_resamples=200))
