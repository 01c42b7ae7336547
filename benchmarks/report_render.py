"""Check that a `scalerl report` page renders: screenshot it with a headless Chromium.

    python -m benchmarks.report_render                       # synthetic runs -> report -> screenshot
    python -m benchmarks.report_render page.html -o shot.png # screenshot an existing page

Without a page, two synthetic runs (known sigmoids, small noise) are written to a temporary
directory and `scalerl report` renders them. The screenshot is taken with the first of
chromium-headless-shell, chromium, chromium-browser, google-chrome found on PATH (Debian:
`apt-get install chromium-headless-shell`); the script prints the PNG's size and how much of it is
not background, and exits 3 when no browser is found. A script, not a test; it imports no other
benchmark module, so `python benchmarks/report_render.py` works too.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BROWSERS = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome")
NO_BROWSER_EXIT_CODE = 3


def find_browser() -> str | None:
    """Path of the first headless-capable Chromium on PATH, or None."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def screenshot(browser: str, html_path: Path, png_path: Path, width: int = 1200, height: int = 3000) -> Path:
    """Render `html_path` from the file system (no server) and write a PNG of the viewport."""
    command = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--window-size={width},{height}",
        f"--screenshot={png_path}",
        html_path.resolve().as_uri(),
    ]
    subprocess.run(command, check=True, capture_output=True, timeout=120)
    return png_path


def ink_fraction(png_path: Path) -> float:
    """Share of pixels that are not near-white: 0 means a blank page."""
    import numpy as np
    from PIL import Image

    with Image.open(png_path) as image:
        pixels = np.asarray(image.convert("L"), dtype=float)
    return float(np.mean(pixels < 240))


def synthetic_report(folder: Path) -> Path:
    """Two synthetic run directories and their report (via the CLI's code path)."""
    import numpy as np

    from scalerl.forecast.curves import sigmoid_reward
    from scalerl.report.html_report import build_report, write_report

    flops = np.array([0, 250, 500, 750, 1000, 1500, 2000, 2500, 3000, 4000, 5000, 6500.0])
    rng = np.random.default_rng(0)
    runs = []
    for name, (a, b) in {"recipe_a": (0.61, 1.9), "recipe_b": (0.52, 1.5)}.items():
        reward = sigmoid_reward(flops, a, b, 2542.0, 0.1) + rng.normal(0.0, 0.004, flops.size)
        reward[0] = 0.1
        (folder / name).mkdir()
        rows = [
            json.dumps({"step": i, "flops": float(c), "val_pass_rate": float(r)})
            for i, (c, r) in enumerate(zip(flops, reward))
        ]
        (folder / name / "metrics.jsonl").write_text("\n".join(rows) + "\n")
        runs.append(folder / name)
    return write_report(build_report(runs), folder / "report.html")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("html", nargs="?", help="page to render (default: a synthetic report)")
    parser.add_argument("-o", "--output", default="report_screenshot.png", help="PNG to write")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the same check (it takes seconds); accepted so that every benchmark has a quick mode",
    )
    args = parser.parse_args(argv)
    browser = find_browser()
    if browser is None:
        print(f"no headless browser found (looked for {', '.join(BROWSERS)})", file=sys.stderr)
        return NO_BROWSER_EXIT_CODE
    with tempfile.TemporaryDirectory(prefix="report_render_") as folder:
        html_path = Path(args.html) if args.html else synthetic_report(Path(folder))
        png_path = screenshot(browser, html_path, Path(args.output))
    from PIL import Image

    with Image.open(png_path) as image:
        size = image.size
    print(
        f"{browser}: {html_path.name} -> {png_path} ({size[0]}x{size[1]} px, "
        f"{ink_fraction(png_path):.1%} of pixels not background)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
