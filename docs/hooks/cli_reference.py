"""MkDocs hook: the command-line reference page (``cli.md``) gets every command's
``--help``, generated from the parsers (:func:`continual_synth.pipelines.commands.cli.
reference_markdown`), where it holds the marker."""
import os

MARKER = "<!-- cli-reference -->"


def on_page_markdown(markdown, page, **kwargs):
    if MARKER not in markdown:
        return markdown
    os.environ.setdefault("COLUMNS", "100")  # argparse wraps the help to the terminal
    from continual_synth.pipelines.commands.cli import reference_markdown
    return markdown.replace(MARKER, reference_markdown())
