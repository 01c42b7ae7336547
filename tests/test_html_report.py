"""`scalerl report`: the self-contained HTML page parses, every embedded image decodes, the tables
hold the fitted numbers; bad inputs are one-line errors; a headless browser renders it (slow)."""

import base64
import io
import json
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from report_payloads import ablation_payload, study_payload
from typer.testing import CliRunner

from scalerl.cli.app import app
from scalerl.forecast.compare import compare_runs
from scalerl.forecast.curves import sigmoid_reward
from scalerl.forecast.fitting import fit_sigmoid
from scalerl.report.console import format_number

FLOPS = np.array([0, 250, 500, 750, 1000, 1500, 2000, 2500, 3000, 4000, 5000, 6500.0])
RUNS = {"run_a": (0.61, 1.9), "run_b": (0.50, 1.5)}  # true A, B; C_mid 2542, R0 0.1
N_BOOTSTRAP = ["--n-draws", "40"]
runner = CliRunner()


class PageParser(HTMLParser):
    """Tables (id -> rows of cell texts, header row first), image sources, list items, tags seen."""

    def __init__(self):
        super().__init__()
        self.tables, self.images, self.list_items, self.tags, self.links = {}, [], [], set(), []
        self._table = self._row = self._cell = self._item = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.add(tag)
        self.links += [value for key, value in attrs.items() if key in ("href", "src") and value]
        if tag == "table":
            self._table = self.tables.setdefault(attrs.get("id", f"table{len(self.tables)}"), [])
        elif tag == "tr" and self._table is not None:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
        elif tag == "img":
            self.images.append(attrs["src"])
        elif tag == "li":
            self._item = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self._table.append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None
        elif tag == "li" and self._item is not None:
            self.list_items.append("".join(self._item).strip())
            self._item = None

    def handle_data(self, data):
        for sink in (self._cell, self._item):
            if sink is not None:
                sink.append(data)


def rows_by_first_cell(table):
    header, *rows = table
    return {row[0]: dict(zip(header, row)) for row in rows}


def write_run(directory: Path, a: float, b: float, seed: int) -> Path:
    reward = sigmoid_reward(FLOPS, a, b, 2542.0, 0.1) + np.random.default_rng(seed).normal(0, 0.004, FLOPS.size)
    reward[0] = 0.1
    directory.mkdir(parents=True)
    (directory / "metrics.jsonl").write_text(
        "".join(
            json.dumps({"step": i, "flops": float(c), "val_pass_rate": float(r)}) + "\n"
            for i, (c, r) in enumerate(zip(FLOPS, reward))
        )
    )
    return directory


def read_points(directory: Path) -> tuple[list, list]:
    rows = [json.loads(line) for line in (directory / "metrics.jsonl").read_text().splitlines()]
    return [row["flops"] for row in rows], [row["val_pass_rate"] for row in rows]


def write_study(directory: Path) -> dict:
    """A study directory as `scalerl study` leaves it: study.json (its documented shape) and study.png."""
    directory.mkdir()
    payload = study_payload()
    (directory / "study.json").write_text(json.dumps(payload))
    buffer = io.BytesIO()
    Image.new("RGB", (64, 32), (200, 30, 30)).save(buffer, format="PNG")
    (directory / "study.png").write_bytes(buffer.getvalue())
    return payload


@pytest.fixture
def inputs(tmp_path):
    runs = [write_run(tmp_path / name, a, b, seed) for seed, (name, (a, b)) in enumerate(RUNS.items())]
    flat = tmp_path / "flat.csv"
    flat.write_text("flops,val_pass_rate\n" + "".join(f"{c},0.2\n" for c in FLOPS))
    study = tmp_path / "study"
    return runs, flat, study, write_study(study)


def test_report_page_embeds_decodable_images_and_the_fitted_numbers(tmp_path, inputs):
    runs, flat, study, _ = inputs
    output = tmp_path / "report.html"
    result = runner.invoke(app, ["report", *map(str, runs), str(flat), str(study), "-o", str(output), *N_BOOTSTRAP])
    assert result.exit_code == 0, result.output
    page = PageParser()
    page.feed(output.read_text())

    assert "script" not in page.tags
    assert all(link.startswith("data:image/png;base64,") for link in page.links)  # nothing external
    assert len(page.images) == 4  # run_a, run_b, both on one axes, the study's figure (the flat run has none)
    for source in page.images:
        with Image.open(io.BytesIO(base64.b64decode(source.split(",", 1)[1]))) as image:
            image.verify()
            assert image.format == "PNG" and image.size[0] >= 64

    table = rows_by_first_cell(page.tables["runs"])
    points = {name: read_points(tmp_path / name) for name in RUNS}
    for name in RUNS:
        fit = fit_sigmoid(*points[name], n_draws=40)
        assert table[name]["A"] == format_number(fit.a) and table[name]["B"] == format_number(fit.b)
        assert table[name]["A interval"] == "[{}, {}]".format(*map(format_number, fit.conf_int(0.8)["A"]))
        assert table[name]["budget (compute)"] == format_number(2 * FLOPS.max())
        assert table[name]["reward at budget"] == format_number(float(fit.predict(2 * FLOPS.max())))
        assert float(table[name]["A"]) == pytest.approx(RUNS[name][0], abs=0.02)
    assert table["flat"]["A"] == "-" and "flat: no learning" in table["flat"]["reward interval"]

    comparison = rows_by_first_cell(page.tables["comparison"])
    assert comparison["1"]["run"] == "run_a" and comparison["2"]["run"] == "run_b"
    expected = compare_runs(points, n_draws=40)
    assert comparison["1"]["A"] == format_number(expected.fits["run_a"].a)
    assert "decided by: ceiling" in output.read_text()
    # the method line names the one model every number above comes from
    assert "fitted by its posterior (emcee)" in output.read_text() and "least squares" not in output.read_text()

    variants = rows_by_first_cell(page.tables["study-study"])
    assert variants["scalerl"]["A"] == "0.6123" and variants["scalerl"]["verdict vs base"] == "base"
    assert variants["loss-dapo"]["A interval"] == "[0.54, 0.56]"
    assert variants["loss-dapo"]["verdict vs base"] == "lower ceiling"
    assert variants["loss-dapo"]["ceiling identified"] == "no" and variants["loss-dapo"]["paper: moves"] == "A"
    assert any(item.startswith("flat: not fitted: flat: no learning") for item in page.list_items)
    assert "study/loss-dapo: ceiling not identified yet" in page.list_items


def test_a_single_run_directory_needs_no_comparison(tmp_path, inputs):
    runs, *_ = inputs
    output = tmp_path / "one.html"
    assert (
        runner.invoke(app, ["report", str(runs[0]), "-o", str(output), "--target-x", "20000", *N_BOOTSTRAP]).exit_code
        == 0
    )
    page = PageParser()
    page.feed(output.read_text())
    assert "comparison" not in page.tables and len(page.images) == 1
    assert rows_by_first_cell(page.tables["runs"])["run_a"]["budget (compute)"] == "20000"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["report", "missing_dir", "-o", "r.html"], "no such file or directory"),
        (["report", "{empty}", "-o", "r.html"], "neither a run directory"),
        (["report", "{run}", "-o", "r.txt"], "must end in .html"),
        (["report", "{run}", "-o", "r.html", "--level", "1.5"], "--level"),
        (["report", "{run}", "-o", "r.html", "--target-x", "-3"], "--target-x"),
    ],
)
def test_bad_input_is_one_error_line(tmp_path, inputs, monkeypatch, arguments, message):
    runs, *_ = inputs
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path)
    arguments = [a.format(empty=tmp_path / "empty", run=runs[0]) for a in arguments]
    result = runner.invoke(app, arguments)
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


def test_a_run_with_live_forecasts_gets_their_history_figure(tmp_path, inputs):
    runs, *_ = inputs
    metrics = runs[0] / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    for index, row in enumerate(rows[4:], start=4):  # what the trainer logs from the 4th validation on
        row.update(
            forecast_A=0.5 + 0.01 * index, forecast_A_low=0.45, forecast_A_high=0.7, ceiling_identified=index > 6
        )
    metrics.write_text("".join(json.dumps(row) + "\n" for row in rows))
    output = tmp_path / "report.html"
    assert runner.invoke(app, ["report", str(runs[0]), "-o", str(output), *N_BOOTSTRAP]).exit_code == 0
    page = PageParser()
    page.feed(output.read_text())
    assert len(page.images) == 2 and 'alt="live forecast history of run_a"' in output.read_text()
    with Image.open(io.BytesIO(base64.b64decode(page.images[1].split(",", 1)[1]))) as image:
        assert image.format == "PNG"


def test_forecast_history_reads_the_logged_forecasts():
    from scalerl.forecast.live import forecast_history

    history = forecast_history(
        [
            {"step": 0, "flops": 0.0, "val_pass_rate": 0.1},
            {
                "step": 10,
                "flops": 5.0,
                "forecast_A": 0.4,
                "forecast_A_low": 0.3,
                "forecast_A_high": 0.6,
                "ceiling_identified": False,
            },
            {
                "step": 20,
                "flops": 9.0,
                "forecast_A": 0.45,
                "forecast_A_low": 0.42,
                "forecast_A_high": 0.5,
                "ceiling_identified": True,
            },
        ]
    )
    assert history["flops"].tolist() == [5.0, 9.0] and history["A"].tolist() == [0.4, 0.45]
    assert history["A_low"].tolist() == [0.3, 0.42] and history["identified"].tolist() == [False, True]
    assert forecast_history([{"step": 0, "flops": 0.0}]) is None


def test_ablation_and_sweep_summaries_become_tables(tmp_path):
    study = tmp_path / "loo"
    study.mkdir()
    (study / "ablation.json").write_text(json.dumps(ablation_payload("leave-one-out")))
    (study / "sweep.json").write_text(json.dumps(ablation_payload("sweep")))
    output = tmp_path / "report.html"
    result = runner.invoke(app, ["report", str(study), "-o", str(output)])
    assert result.exit_code == 0, result.output
    page = PageParser()
    page.feed(output.read_text())
    assert {"study-loo-ablation", "study-loo-sweep"} <= set(page.tables) and "runs" not in page.tables
    rows = rows_by_first_cell(page.tables["study-loo-ablation"])
    assert rows["scalerl"]["A"] == "0.61" and rows["scalerl"]["A interval"] == "[0.6, 0.62]"
    assert rows["scalerl"]["effect"] == "base" and rows["scalerl"]["seeds fitted"] == "2/2"
    assert rows["loss-dapo"]["effect"] == "moves the ceiling" and rows["loss-dapo"]["direction"] == "down"
    assert rows["loss-dapo"]["delta A"] == "-0.11" and rows["loss-dapo"]["seeds fitted"] == "1/2"
    assert "margin 0.031 (seed spread)" in output.read_text() and "sweep of batch_prompts" in output.read_text()
    assert "loo (ablation)/loss-dapo (m.jsonl): fit failed: flat run" in page.list_items


def _render_script():
    return Path(__file__).resolve().parent.parent / "benchmarks" / "report_render.py"


@pytest.mark.slow
def test_headless_browser_renders_the_page(tmp_path, inputs):
    if not any(
        shutil.which(name) for name in ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome")
    ):
        pytest.skip("no headless browser installed")
    runs, *_ = inputs
    page = tmp_path / "report.html"
    assert runner.invoke(app, ["report", *map(str, runs), "-o", str(page), *N_BOOTSTRAP]).exit_code == 0
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>")
    fractions = {}
    for html in (page, blank):
        shot = tmp_path / f"{html.stem}.png"
        done = subprocess.run(
            [sys.executable, str(_render_script()), str(html), "-o", str(shot)],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr
        fractions[html.stem] = float(done.stdout.rsplit("px, ", 1)[1].split("%")[0]) / 100
    assert fractions["blank"] < 0.001 < 0.01 < fractions["report"]


def test_a_symlinked_image_out_of_the_study_folder_is_not_embedded(tmp_path):
    study = tmp_path / "loo"
    study.mkdir()
    (study / "ablation.json").write_text(json.dumps(ablation_payload("leave-one-out")))
    secret = tmp_path / "secret.png"
    Image.new("RGB", (3, 2), (255, 0, 0)).save(secret)
    (study / "ablation.png").symlink_to(secret)
    output = tmp_path / "report.html"
    result = runner.invoke(app, ["report", str(study), "-o", str(output)])
    assert result.exit_code == 0, result.output
    page = PageParser()
    page.feed(output.read_text())
    assert base64.b64encode(secret.read_bytes()).decode("ascii") not in output.read_text()
    assert any("symbolic link out of the study folder; its image is not embedded" in item for item in page.list_items)
    (study / "ablation.png").unlink()
    (study / "ablation.json").rename(tmp_path / "elsewhere.json")
    (study / "ablation.json").symlink_to(tmp_path / "elsewhere.json")
    result = runner.invoke(app, ["report", str(study), "-o", str(tmp_path / "again.html")])
    assert result.exit_code == 2 and result.stderr.startswith("error: ") and "outside" in result.stderr
