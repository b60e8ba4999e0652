import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("shovir/swap_sensitivity")
launch_gradio_widget(module)
