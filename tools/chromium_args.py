"""Chromium's command-line flags for every headless launch: the browser tests, the benchmark, the screenshots."""

# No sandbox and no GPU because the launches run in containers without either; no background
# networking, component updates or first-run pages because nothing here may call the network and
# every launch should start the same way.
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
