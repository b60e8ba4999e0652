"""The shovir leaderboard Space: the results documents in ./results, plus those of the Hub dataset
named by `shovir_results_repo` in this Space's README (downloaded at start)."""

from pathlib import Path

from shovir.leaderboard import build_app
from shovir.leaderboard.data import fetch_results, space_results_repo

HERE = Path(__file__).parent
RESULTS = HERE / "results"
repo = space_results_repo(HERE / "README.md")
if repo:
    fetch_results(repo, RESULTS / "hub")

demo = build_app(RESULTS)

if __name__ == "__main__":
    demo.launch()
