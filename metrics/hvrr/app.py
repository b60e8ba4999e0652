import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("shovir/hvrr")
launch_gradio_widget(module)
