"""concepts.yml (the book's list of concepts) and the checks in the notebooks agree; the page shows them."""

import re
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "_ext"))
from dlnotes_site import concept_checks, concept_names  # noqa: E402

NAMES = concept_names(ROOT)
CHECKS = concept_checks(ROOT)


def test_concept_ids_are_well_formed_sorted_and_named():
    assert all(re.fullmatch(r"\d\d\.\d\d", cid) for cid in NAMES)
    assert list(NAMES) == sorted(NAMES)
    assert all(isinstance(name, str) and len(name) > 5 for name in NAMES.values())


def test_every_listed_concept_is_checked_in_a_notebook():
    assert sorted(set(NAMES) - set(CHECKS)) == []


def test_every_check_uses_a_listed_concept():
    assert sorted(set(CHECKS) - set(NAMES)) == []


def test_the_concept_map_page_lists_every_concept_with_its_section(book):
    page = (book / "concept_map.html").read_text()
    for cid in NAMES:
        assert f"<td><p>{cid}</p></td>" in page, cid
        for docname in CHECKS[cid]:
            assert f'href="{docname}.html' in page
