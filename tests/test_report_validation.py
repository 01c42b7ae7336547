"""`scalerl report` checks every input file against its schema: one `error:` line naming the file
and the field, never a traceback (the issue's malformed study/ablation/metrics reproducers)."""

import copy
import json
import os

import pytest
from report_payloads import ablation_payload, study_payload
from typer.testing import CliRunner

from scalerl.cli.app import app
from scalerl.errors import InputError
from scalerl.report.schemas import field_path, validate_summary

runner = CliRunner()

STUDY = study_payload()
ABLATION = ablation_payload("leave-one-out")


def changed(document, path, value):
    document = copy.deepcopy(document)
    target = document
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return document


def report(tmp_path, name, data: bytes):
    study = tmp_path / "study"
    study.mkdir(exist_ok=True)
    (study / name).write_bytes(data)
    return runner.invoke(app, ["report", str(study), "-o", str(tmp_path / "r.html")])


def assert_one_error(result, *fragments):
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.parametrize(
    "name, document, fragments",
    [
        ("study.json", changed(STUDY, ["variants"], None), ["study.json", "field variants:"]),
        (
            "study.json",
            changed(STUDY, ["variants", 0, "fit", "params", "A"], "0.61"),
            ["field variants[0].fit.params.A:", "valid number"],
        ),
        (
            "study.json",
            changed(STUDY, ["variants", 0, "fit", "intervals", "A"], [0.6]),
            ["field variants[0].fit.intervals.A:", "at least 2 items"],
        ),
        ("study.json", changed(STUDY, ["variants", 0, "fit", "n_points"], True), ["field variants[0].fit.n_points"]),
        ("study.json", changed(STUDY, ["variants", 0], None), ["field variants[0]:"]),
        ("study.json", changed(STUDY, ["margin"], [1, 2]), ["field margin:"]),
        ("study.json", [1, 2, 3], ["field (top level)"]),
        ("ablation.json", changed(ABLATION, ["variants"], None), ["ablation.json", "field variants:"]),
        ("ablation.json", changed(ABLATION, ["margin", "value"], "wide"), ["field margin.value:"]),
        (
            "sweep.json",
            changed(ABLATION, ["variants", 0, "params", "A", "mean"], {"x": 1}),
            ["sweep.json", "field variants[0].params.A.mean:"],
        ),
        (
            "sweep.json",
            changed(ABLATION, ["variants", 0, "seeds", 0, "params"], [0.6]),
            ["field variants[0].seeds[0].params:"],
        ),
    ],
)
def test_malformed_summaries_name_file_and_field(tmp_path, name, document, fragments):
    assert_one_error(report(tmp_path, name, json.dumps(document).encode()), *fragments)


@pytest.mark.parametrize(
    "data, fragment",
    [
        (b'{"variants": [\xff]}', "not UTF-8 text (byte 14)"),
        (b"[" * 100_000 + b"]" * 100_000, "not usable JSON"),
        (b'{"margin": ' + b"9" * 5000 + b', "variants": []}', "not usable JSON"),
        (b'{"margin": NaN, "variants": []}', "field margin: Input should be a finite number"),
        (b'{"variants": [', "not valid JSON"),
    ],
)
def test_hostile_bytes_are_one_error(tmp_path, data, fragment):
    assert_one_error(report(tmp_path, "study.json", data), "study.json", fragment)


def test_valid_summaries_pass_unchanged():
    assert validate_summary(STUDY, "study", "s.json")["variants"][0]["fit"]["intervals"]["A"] == [0.6, 0.625]
    assert validate_summary({**ABLATION, "new_field": 1}, "ablation", "a.json")["margin"]["value"] == 0.031
    with pytest.raises(InputError, match="a.json: field variants\\[0\\].slug: Field required"):
        validate_summary({"variants": [{}]}, "ablation", "a.json")
    assert field_path(("variants", 2, "fit", "intervals", "A")) == "variants[2].fit.intervals.A"


def metrics_run(tmp_path, forecast_a):
    run = tmp_path / "run"
    run.mkdir()
    rows = [{"step": s, "flops": 100.0 * s, "val_pass_rate": 0.1 + 0.5 * s / (s + 5)} for s in range(12)]
    rows[8]["forecast_A"] = forecast_a
    (run / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return run


@pytest.mark.parametrize(
    "value, fragment",
    [
        ("high", "valid number"),
        (float("inf"), "finite number"),
        (float("nan"), "finite number"),
        ([0.5], "valid number"),
    ],
)
def test_bad_forecast_values_in_metrics_are_one_error(tmp_path, value, fragment):
    result = runner.invoke(
        app, ["report", str(metrics_run(tmp_path, value)), "-o", str(tmp_path / "r.html"), "--n-draws", "20"]
    )
    assert_one_error(result, "metrics.jsonl: line 9: field forecast_A:", fragment)


def test_non_utf8_file_name_in_the_report(tmp_path):
    run = metrics_run(tmp_path, 0.6)
    odd = tmp_path / os.fsdecode(b"run\xff")
    run.rename(odd)
    result = runner.invoke(app, ["report", str(odd), "-o", str(tmp_path / "r.html"), "--n-draws", "20"])
    assert result.exit_code == 0, result.output
    assert "report written to" in result.stderr
    assert "run\\udcff" in (tmp_path / "r.html").read_text(encoding="utf-8")
