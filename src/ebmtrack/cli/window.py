"""The window of ``ebmtrack track --show`` and the first boxes drawn with the mouse
(``--init select``), through OpenCV's HighGUI.

ebmtrack depends on OpenCV's headless build, which has no windows; the GUI build is the
``gui`` extra (docs/live.md says how to switch). Everything GUI goes through :func:`backend`, so
that tests can replace the window layer with a fake.
"""

from __future__ import annotations

from ebmtrack.cli.main import CLIError

WINDOW = "ebmtrack track"
QUIT_KEYS = (ord("q"), 27)  # q, Esc

GUI_MISSING = (
    "{flag} needs OpenCV with windows; this is the headless build. Swap it for the GUI build "
    "(docs/live.md): pip install 'ebmtrack[gui]' && pip uninstall -y "
    "opencv-contrib-python-headless && pip install --force-reinstall --no-deps "
    "opencv-contrib-python"
)


def backend():
    """The module whose HighGUI functions draw the window (``cv2``)."""
    import cv2

    return cv2


def gui_problem() -> str | None:
    """Why no window can open (None when one can): the headless build, or no display."""
    cv2 = backend()
    info = cv2.getBuildInformation() if hasattr(cv2, "getBuildInformation") else ""
    section = info.split("GUI:", 1)[1].split("\n", 1)[0] if "GUI:" in info else ""
    if "NONE" in section.upper():
        return "headless"
    return None


def require_gui(flag: str) -> None:
    """CLIError (one line naming ``flag``) when this OpenCV cannot open a window."""
    if gui_problem() is not None:
        raise CLIError(GUI_MISSING.format(flag=flag))


class Window:
    """One window showing RGB frames; :meth:`show` returns False once the user asked to stop
    (q or Esc pressed, or the window closed)."""

    def __init__(self, title: str = WINDOW) -> None:
        self.cv2, self.title = backend(), title
        try:
            self.cv2.namedWindow(title, self.cv2.WINDOW_NORMAL)
        except Exception as err:  # cv2.error: no display
            raise CLIError(f"--show: cannot open a window: {_first_line(err)}") from None

    def show(self, image) -> bool:
        cv2 = self.cv2
        cv2.imshow(self.title, cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
        key = cv2.waitKey(1) & 0xFF
        if key in QUIT_KEYS:
            return False
        return cv2.getWindowProperty(self.title, cv2.WND_PROP_VISIBLE) >= 1

    def close(self) -> None:
        try:
            self.cv2.destroyWindow(self.title)
        except Exception:  # already closed by the user
            pass


def select_boxes(frame) -> list[tuple[float, float, float, float]]:
    """Boxes the user draws on the RGB ``frame`` (``cv2.selectROIs``: drag a box, Enter or
    Space to keep it, another, then Esc to finish); CLIError when none was drawn."""
    cv2 = backend()
    title = f"{WINDOW}: draw the box(es), Enter after each, Esc when done"
    try:
        image = frame if frame.ndim == 2 else cv2.cvtColor(frame, cv2.COLOR_RGB2BGR)
        rois = cv2.selectROIs(title, image, False)
    except Exception as err:  # cv2.error: no display
        raise CLIError(f"--init select: cannot open a window: {_first_line(err)}") from None
    finally:
        try:
            cv2.destroyWindow(title)
        except Exception:
            pass
    boxes = [tuple(float(v) for v in roi) for roi in rois if roi[2] > 0 and roi[3] > 0]
    if not boxes:
        raise CLIError("--init select: no box was drawn")
    return boxes


def _first_line(err: Exception) -> str:
    text = str(getattr(err, "err", "") or err).strip()
    return text.splitlines()[0] if text else type(err).__name__
