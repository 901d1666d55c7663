"""The X11 side of the window tests: find a top-level window by title and close it
the way a window manager's close button does (a WM_DELETE_WINDOW client message),
and take a screenshot of the whole screen."""
from __future__ import annotations

import subprocess
from pathlib import Path

from Xlib import X, display, protocol


def _title(d: display.Display, w) -> str:
    try:
        name = w.get_full_property(d.intern_atom("_NET_WM_NAME"), d.intern_atom("UTF8_STRING"))
        if name and name.value:
            return name.value.decode("utf-8", "replace") if isinstance(name.value, bytes) else str(name.value)
        return w.get_wm_name() or ""
    except Exception:  # noqa: BLE001 - windows come and go while we walk the tree
        return ""


def find_windows(title: str, display_name: str) -> list[int]:
    """Ids of mapped windows whose title is exactly `title`."""
    d = display.Display(display_name)
    try:
        found = []
        stack = [d.screen().root]
        while stack:
            w = stack.pop()
            try:
                children = w.query_tree().children
            except Exception:  # noqa: BLE001
                continue
            for c in children:
                try:
                    mapped = c.get_attributes().map_state == X.IsViewable
                except Exception:  # noqa: BLE001
                    continue
                if mapped and _title(d, c) == title:
                    found.append(c.id)
                stack.append(c)
        return found
    finally:
        d.close()


def close_window(window_id: int, display_name: str) -> None:
    """What the close button does: ask the client to close (WM_PROTOCOLS / WM_DELETE_WINDOW)."""
    d = display.Display(display_name)
    try:
        w = d.create_resource_object("window", window_id)
        event = protocol.event.ClientMessage(window=w, client_type=d.intern_atom("WM_PROTOCOLS"),
                                             data=(32, [d.intern_atom("WM_DELETE_WINDOW"), X.CurrentTime, 0, 0, 0]))
        w.send_event(event, event_mask=X.NoEventMask, propagate=False)
        d.sync()
    finally:
        d.close()


def screenshot(path: Path, display_name: str) -> Path:
    """The whole screen as PNG (ImageMagick's `import`)."""
    subprocess.run(["import", "-display", display_name, "-window", "root", str(path)], check=True, timeout=60)
    return path
