"""What each tracker option does and takes is read from the code's own docs and checks: every
option of every registered tracker has both, so a new option without a docstring entry fails
here."""

import pytest

from ebmtrack.tracking.option_docs import docstring_entries, option_docs, tracker_page
from ebmtrack.tracking.registry import accepted_options, tracker_names


@pytest.mark.parametrize("name", tracker_names())
def test_every_option_of_every_tracker_is_documented(name):
    docs = option_docs(name)
    assert [d.name for d in docs] == sorted(accepted_options(name))
    undocumented = [d.name for d in docs if not (d.text and d.allowed)]
    assert not undocumented, f"{name}: options without a docstring entry: {undocumented}"
    assert tracker_page(name).startswith("docs/")


def test_entries_of_several_names_and_continuations():
    def documented():
        """Summary.

        Args:
            a, b: shared text
                that goes on.
            c: its own.

        Section:
            d: under a section.
        """

    assert docstring_entries(documented) == {
        "a": "shared text that goes on.",
        "b": "shared text that goes on.",
        "c": "its own.",
        "d": "under a section.",
    }


def test_a_see_reference_is_followed_and_a_check_gives_the_values():
    filter_reg = next(d for d in option_docs("atom") if d.name == "filter_reg")
    assert filter_reg.text == "lambda of w2." and filter_reg.allowed == "a number > 0"
    lost_crops = next(d for d in option_docs("atom-lt") if d.name == "lost_crops")
    assert lost_crops.allowed == "an integer >= 2"
