import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("shovir/flip_rate")
launch_gradio_widget(module)
