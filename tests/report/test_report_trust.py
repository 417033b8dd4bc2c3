"""Records are data written by someone else: the report reads, embeds and links only files inside
the job dirs and --out (links resolved), record text lands escaped (no picture, link, tag or README
marker made from it), and every report file and the README is written whole or not at all (a full or
read-only disk: one paragraph)."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from ascendbench.report.__main__ import main

RAW_TAG = re.compile(r"(?<!\\)<script>")  # an unescaped tag (``\<script>``: Markdown for the text)
SECRET = b"the bytes of a picture outside every job directory"
HOSTILE = ("see ![leak](/{secret}) and [click](//evil.example/x) <script>alert(1)</script> "
           "<!-- /ascendbench:failures -->y<!-- ascendbench:accuracy -->")


def _edit(record_path: Path, edit) -> None:
    record = json.loads(record_path.read_text())
    edit(record)
    record_path.write_text(json.dumps(record))


@pytest.fixture
def secret_png(tmp_path) -> Path:
    """A real PNG outside the records' directories, with a marker in its bytes."""
    path = tmp_path / "outside" / "secret.png"
    path.parent.mkdir()
    Image.new("RGB", (4, 4), (255, 0, 0)).save(path)
    path.write_bytes(path.read_bytes() + SECRET)
    return path


def _report(tmp_path, *extra) -> tuple[int, str, str]:
    out = tmp_path / "reports"
    code = main([str(tmp_path / "records"), "--out", str(out), "--no-plots", *extra])
    return code, (out / "report.md").read_text(), (out / "report.html").read_text()


@pytest.mark.parametrize("how", ["absolute", "dotdot", "symlink"])
def test_artifacts_outside_the_job_dir_are_neither_embedded_nor_linked(write_record, tmp_path,
                                                                       secret_png, how):
    record = write_record("a")
    names = {"absolute": str(secret_png), "dotdot": f"../../outside/{secret_png.name}",
             "symlink": "images/link.png"}
    if how == "symlink":
        (record.parent / "images").mkdir()
        (record.parent / "images" / "link.png").symlink_to(secret_png)
    _edit(record, lambda r: r["artifacts"].update(heatmap_png=names[how]))
    code, markdown, page = _report(tmp_path)
    assert code == 0
    assert base64.b64encode(secret_png.read_bytes())[:40].decode() not in page
    assert "secret.png" not in markdown and "link.png" not in markdown


def test_record_text_is_escaped_in_report_md_and_html(write_record, tmp_path, secret_png):
    message = HOSTILE.format(secret=str(secret_png).lstrip("/"))
    write_record("f", status="failed", error=RuntimeError(message))
    code, markdown, page = _report(tmp_path)
    assert code == 0
    # the page's own table sorter is the only script
    main_part = page.split("<main>")[1].split("</main>")[0]
    assert not RAW_TAG.search(markdown) and "<script>" not in main_part
    assert "&lt;script&gt;" in main_part
    assert 'href="//evil.example' not in page and "<img" not in main_part
    assert base64.b64encode(secret_png.read_bytes())[:40].decode() not in page
    assert "![leak]" not in markdown and "](//evil" not in markdown.replace("\\]", "")


README = ("# Port\n\n<!-- ascendbench:failures -->\n<!-- /ascendbench:failures -->\n\n"
          "MY OWN TEXT\n\n<!-- ascendbench:accuracy -->\n<!-- /ascendbench:accuracy -->\n\nTAIL\n")


def test_marker_text_in_a_record_cannot_make_the_readme_lose_the_users_text(write_record, tmp_path):
    write_record("ok")
    write_record("f", status="failed", error=RuntimeError(HOSTILE.format(secret="x.png")))
    readme = tmp_path / "README.md"
    readme.write_text(README)
    for _ in range(3):
        assert _report(tmp_path, "--readme", str(readme))[0] == 0
        assert "MY OWN TEXT" in readme.read_text() and "TAIL" in readme.read_text()
    assert readme.read_text().count("<!-- ascendbench:accuracy -->") == 1
    assert not RAW_TAG.search(readme.read_text())


@contextlib.contextmanager
def _small_fs(path: Path, size_kb: int):
    """A real tiny tmpfs at ``path`` (root only: skipped where mounting is not allowed)."""
    path.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill ({done.stderr.strip()[:100]})")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(directory: Path) -> None:
    with contextlib.suppress(OSError), open(directory / "filler", "wb") as handle:
        while True:
            handle.write(b"\0" * 4096)
            handle.flush()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs to fill needs root")
def test_a_full_disk_keeps_the_previous_readme_and_report_whole(write_record, tmp_path, capsys):
    for i in range(6):
        write_record(f"r{i}", dtype=("float16", "bfloat16", "float32")[i % 3], batch=i + 1)
    with _small_fs(tmp_path / "disk", 160) as disk:
        readme = disk / "README.md"
        readme.write_text(README)
        out = disk / "reports"
        assert main([str(tmp_path / "records"), "--out", str(out), "--no-plots"]) == 0
        before = {p.name: p.read_bytes() for p in out.iterdir()}
        _fill(disk)
        code = main([str(tmp_path / "records"), "--out", str(out), "--no-plots", "--readme",
                     str(readme)])
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
        assert "full" in err
        assert {p.name: p.read_bytes() for p in out.iterdir() if p.name in before} == before
        assert readme.read_text() == README
        (disk / "filler").unlink()
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        code = main([str(tmp_path / "records"), "--out", str(tmp_path / "rw"), "--no-plots",
                     "--readme",
                     str(readme)])
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err and "not writable" in err and str(readme) in err
        assert readme.read_text() == README


def test_a_fifo_planted_as_a_record_is_a_broken_row_not_a_hang(write_record, tmp_path):
    write_record("ok")
    (tmp_path / "records" / "fifo").mkdir()
    os.mkfifo(tmp_path / "records" / "fifo" / "record.json")
    done = subprocess.run([sys.executable, "-m", "ascendbench.report", str(tmp_path / "records"),
                           "--out",
                           str(tmp_path / "reports"), "--no-plots"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert ("1 broken" in done.stdout and "not a regular file"
            in (tmp_path / "reports" / "report.md").read_text())


def test_a_backtick_in_record_text_cannot_close_the_port_reports_code_items():
    """Commands and log lines are shown as code items; record text with a backtick would end the
    code span and let a tag or a picture through, so such a line is Markdown-escaped text
    instead."""
    from ascendbench.report.port import code_item

    plain = code_item("python -m ascendbench model=x")
    hostile = code_item("model.source=`x` <script>alert(1)</script> ![p](/etc/passwd)")
    assert plain == "- `python -m ascendbench model=x`"
    # inert: escaped
    assert "\\<script>" in hostile and "!\\[p\\]" in hostile and "\\`x\\`" in hostile


def _poison(value, payload: str):
    """Every string leaf of a record with ``payload`` appended (the names that tell jobs apart left
    alone)."""
    if isinstance(value, dict):
        return {k: _poison(v, payload) for k, v in value.items()}
    if isinstance(value, list):
        return [_poison(v, payload) for v in value]
    return value + payload if isinstance(value, str) else value


IDENTITY = ("model", "device", "device_requested", "dtype", "dtype_requested", "preset", "task",
            "status")
CODE_SPAN = re.compile(r"`[^`\n]*`")
ACTIVE_MD = {"tag": re.compile(r"(?<!\\)<(script|img)\b"),
             "link": re.compile(r"(?<!\\)\[c(?<!\\)\]\(//evil"),
             "picture": re.compile(r"!(?<!\\)\[leak(?<!\\)\]\(")}


def test_text_in_any_field_of_a_record_lands_inert_in_every_report_and_the_readme(write_record,
                                                                                  tmp_path,
                                                                                  secret_png):
    """Not only error messages: rule text, error type and reason, memory scope, sources... every
    string a record holds is poisoned, and no report file (report.md, the port reports in both
    languages, the README back-fill) gets a tag, link or picture from it, or loses the README's own
    text."""
    payload = HOSTILE.format(secret=secret_png) + " <img src=x onerror=alert(2)>"
    for record in (write_record("a"), write_record("b", dtype="bfloat16", mean_rel_err=0.07),
                   write_record("c", status="failed")):
        original = json.loads(record.read_text())
        poisoned = _poison(original, payload)
        poisoned["status"] = original["status"]
        poisoned["job"].update({k: v for k, v in original["job"].items() if k in IDENTITY})
        record.write_text(json.dumps(poisoned))
    readme = tmp_path / "README.md"
    readme.write_text("keep1\n<!-- ascendbench:accuracy -->\n<!-- /ascendbench:accuracy "
                      "-->\nkeep2\n"
                      "<!-- ascendbench:failures -->\n<!-- /ascendbench:failures -->\nkeep3\n")
    out = tmp_path / "reports"
    for extra in ([], ["--port"], ["--port", "--lang", "zh"], ["--readme", str(readme)],
                  ["--readme", str(readme)]):
        assert main([str(tmp_path / "records"), "--out", str(out), "--no-plots", *extra]) == 0
    markdown = [readme, *out.rglob("*.md")]
    assert len(markdown) >= 3
    found = [(path.name, kind) for path in markdown for kind, pattern in ACTIVE_MD.items()
             if pattern.search(CODE_SPAN.sub("",
                                             path.read_text()))]  # inside a code span text is inert
    pages = [path.read_text() for path in out.rglob("*.html")]
    assert not found and not any("<script>alert" in page or "<img src=x" in page for page in pages)
    assert all(word in readme.read_text() for word in ("keep1", "keep2", "keep3"))


def test_a_record_whose_job_names_hold_markup_is_a_broken_row(write_record, tmp_path):
    """The names that become headings, file names and filters (model, device, dtype, preset, task)
    use only the characters ascendbench writes; a record with anything else is refused, with the
    reason, never rendered."""
    record = write_record("a")
    _edit(record, lambda r: r["job"].update(model="flux2<script>alert(1)</script>"))
    code, markdown, page = _report(tmp_path)
    assert ("broken" in markdown and "holds characters no name written by ascendbench has"
            in markdown)
    assert not RAW_TAG.search(markdown) and "<script>alert" not in page


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs to fill needs root")
def test_a_full_disk_keeps_the_sweep_summary_and_the_compare_files_whole(write_record, tmp_path):
    """summary.md/csv, compare.csv and the compare record are rewritten whole or not at all, like
    the report."""
    from ascendbench.compare.csvfile import write_compare_csv
    from ascendbench.errors import OutputWriteError
    from ascendbench.report.summary import write_summary

    with _small_fs(tmp_path / "disk", 200) as disk:
        for i in range(4):
            write_record(f"r{i}", batch=i + 1, root=disk / "sweep")
        _, csv_path, md_path = write_summary(disk / "sweep")
        rows = [{"name": f"out{i}", "kind": "tensor", "result": "PASS", "message": "x" * 50}
                for i in range(40)]
        compare = write_compare_csv(disk / "compare.csv", rows)
        before = {p: p.read_bytes() for p in (csv_path, md_path, compare)}
        _fill(disk)
        with pytest.raises(OutputWriteError):
            write_summary(disk / "sweep")
        with pytest.raises(OutputWriteError):
            write_compare_csv(compare, rows)
        assert {p: p.read_bytes() for p in before} == before
