import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("shovir/delta_fn")
launch_gradio_widget(module)
