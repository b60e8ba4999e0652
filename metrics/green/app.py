import shovir
from shovir.spaces import build_widget

demo = build_widget(shovir.load_metric("green"))

if __name__ == "__main__":
    demo.launch()
