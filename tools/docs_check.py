"""Load the built documentation site in headless Chromium, as a reader would.

    python tools/docs_check.py                 # after make docs; make docs-check runs both

Serves ``docs/_build/html`` on a local port (127.0.0.1 only), opens the index,
one case study and one API page in headless Chromium, and saves a screenshot
of each under ``docs/_build/screenshots/``. It fails when the server answered
any request of the browser with an error (a missing image, style sheet or
script: a 404), when a page's ``<img>`` files were not fetched, or when the
case-study page shows no figure. Chromium is Debian's package (``apt-get
install chromium``); without it the check says so and exits with status 0
after a ``SKIPPED`` line, so that a machine without a browser is not a failure.
"""

from __future__ import annotations

import argparse
import html.parser
import shutil
import subprocess
import sys
import tempfile
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "docs" / "_build" / "html"
SHOTS = ROOT / "docs" / "_build" / "screenshots"
PAGES = {"index": "index.html",
         "case_study": "case_studies/spammers_and_difficulty.html",
         "api": "api/generated/crowd_models.auto.auto_fit.html"}
"""Screenshot name -> page: the front page, a case study with figures, an API page."""
TALL = {"case_study": 16000}
"""Pages taken whole (window height in pixels), then cut into screens of 2000."""


class _Recorder(SimpleHTTPRequestHandler):
    """Serves the site and records (path, status) of every request."""

    log: list = []

    def log_request(self, code="-", size="-"):
        self.log.append((self.path.split("?")[0], int(code)))

    def log_message(self, *args):  # quiet
        pass


class _Images(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.sources = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.sources.append(dict(attrs).get("src", ""))


def browser() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def inked(path: Path) -> float:
    """Share of a screenshot's pixels that are not near-white."""
    from PIL import Image

    grey = Image.open(path).convert("L")
    histogram = grey.histogram()
    return 1 - sum(histogram[245:]) / sum(histogram)


def cut(path: Path, height: int) -> list[Path]:
    """Cut a tall screenshot into screens ``<name>_1.png``, ... (blank ones
    dropped), so that each can be looked at."""
    from PIL import Image

    whole = Image.open(path)
    pieces = []
    for i, top in enumerate(range(0, whole.height, height), start=1):
        piece = path.with_name(f"{path.stem}_{i}.png")
        whole.crop((0, top, whole.width, min(top + height, whole.height))).save(piece)
        if inked(piece) < 0.01:
            piece.unlink()
        else:
            pieces.append(piece)
    return pieces


def shoot(chrome: str, url: str, target: Path, height: int = 2400) -> None:
    """Open ``url`` in headless Chromium (images and scripts loaded, a short wait
    for them) and save a screenshot 1280 pixels wide and ``height`` high."""
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([chrome, "--headless", "--no-sandbox", "--disable-gpu",
                        "--hide-scrollbars", f"--user-data-dir={profile}",
                        f"--window-size=1280,{height}", "--virtual-time-budget=8000",
                        f"--screenshot={target}", url],
                       check=True, capture_output=True, timeout=120)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    chrome = browser()
    if chrome is None:
        print("SKIPPED: no Chromium on this machine (apt-get install chromium); the built "
              "site was not checked in a browser.")
        return 0
    if not (SITE / "index.html").exists():
        print(f"no site at {SITE}: run make docs first.", file=sys.stderr)
        return 1
    SHOTS.mkdir(parents=True, exist_ok=True)
    handler = partial(_Recorder, directory=str(SITE))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    problems = []
    try:
        for name, page in PAGES.items():
            if not (SITE / page).exists():
                problems.append(f"{page}: not built")
                continue
            _Recorder.log = []
            target = SHOTS / f"{name}.png"
            shoot(chrome, f"http://127.0.0.1:{port}/{page}", target, TALL.get(name, 2400))
            failed = [(path, code) for path, code in _Recorder.log if code >= 400
                      and not path.endswith("favicon.ico")]
            fetched = {path for path, code in _Recorder.log if code < 400}
            images = _Images()
            images.feed((SITE / page).read_text(encoding="utf-8"))
            base = "/" + str(Path(page).parent).strip(".") + "/"
            local = [src for src in images.sources if not src.startswith(("http", "data:"))]
            missing = [src for src in local if "/" + str(
                (Path(base) / src).resolve().relative_to("/")) not in fetched]
            print(f"{page}: {len(_Recorder.log)} requests, {len(local)} images, "
                  f"screenshot {target.relative_to(ROOT)} ({target.stat().st_size} bytes)")
            problems += [f"{page}: {path} answered {code}" for path, code in failed]
            problems += [f"{page}: image {src} was not loaded" for src in missing]
            if name.startswith("case_study") and not local:
                problems.append(f"{page}: no figure on the case-study page")
            if not target.exists() or inked(target) < 0.01:
                problems.append(f"{page}: the screenshot is missing or blank")
            elif name in TALL:
                for piece in cut(target, 2000):
                    print(f"  {piece.relative_to(ROOT)}")
    finally:
        server.shutdown()
    for problem in problems:
        print("FAILED:", problem, file=sys.stderr)
    print("browser check " + ("failed" if problems else "passed"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
