import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("shovir/chexbert_f1")
launch_gradio_widget(module)
