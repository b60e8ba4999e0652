import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("shovir/occlusion_delta")
launch_gradio_widget(module)
