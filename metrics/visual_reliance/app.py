import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("shovir/visual_reliance")
launch_gradio_widget(module)
