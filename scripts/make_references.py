"""Write references.md, the book's list of references, from references.bib.

The list is plain Markdown, so it reads the same on the website, in JupyterLab, in Colab and on GitHub. Every entry
starts with an anchor named by its BibTeX key, and the citations link to it:
``[Goodfellow et al. (2015)](../../references.md#goodfellow2015explaining)``. The website resolves these links
through ``_ext/dlnotes_site.py``; ``tests/test_hygiene.py`` keeps the file in sync with references.bib and every
citation pointing at an entry whose first author and year it names.

    python scripts/make_references.py          # rewrite references.md
"""

from __future__ import annotations

from pathlib import Path

from pybtex.database import Entry, Person, parse_file
from pybtex.richtext import Text

ROOT = Path(__file__).resolve().parent.parent
BIB, PAGE = ROOT / "references.bib", ROOT / "references.md"
INTRO = """# References

The original papers behind the named results of the book, cited where they are used as *Author (year)* with a
link to the entry below. The list is generated from `references.bib` by `scripts/make_references.py`.
"""


def plain(latex: str) -> str:
    """BibTeX text without its braces and accent commands: ``{WaveNet}`` -> WaveNet, ``{\\"o}`` -> ö."""
    return Text.from_latex(latex).render_as("text")


def surname(person: Person) -> str:
    """The name a citation uses: "van den Oord", "McCulloch"."""
    return plain(" ".join(person.prelast_names + person.last_names))


def name(person: Person) -> str:
    """Surname and initials: "van den Oord, A."."""
    initials = " ".join(f"{plain(n)[0]}." for n in person.first_names + person.middle_names)
    return f"{surname(person)}, {initials}" if initials else surname(person)


def names(persons: list[Person]) -> str:
    listed = [name(p) for p in persons]
    return listed[0] if len(listed) == 1 else ", ".join(listed[:-1]) + " and " + listed[-1]


def first_author(entry: Entry) -> str:
    return surname((entry.persons.get("author") or entry.persons["editor"])[0])


def fields(entry: Entry) -> dict[str, str]:
    """The entry's fields in plain text, by lower-case name."""
    return {key.lower(): plain(value) for key, value in entry.fields.items()}


def venue(entry: Entry, f: dict[str, str]) -> str:
    """Where the work appeared (`f`: the entry's `fields`): journal, volume(number), pages; proceedings;
    publisher; school; report."""
    pages = f.get("pages", "").replace("--", "–")
    if entry.type == "article":
        volume = f.get("volume", "") + (f"({f['number']})" if "number" in f else "")
        return ", ".join(p for p in (f"*{f['journal']}*", volume, pages) if p)
    if entry.type in ("inproceedings", "incollection"):
        editors = f"{names(entry.persons['editor'])} (eds.), " if "editor" in entry.persons else ""
        return "In " + editors + ", ".join(p for p in (f"*{f['booktitle']}*", pages, f.get("publisher")) if p)
    if entry.type == "book":
        return ", ".join(p for p in (f.get("edition") and f"{f['edition']} edition", f.get("publisher"),
                                     f.get("address")) if p)  # fmt: skip
    if entry.type.endswith("thesis"):
        return ("PhD thesis" if entry.type == "phdthesis" else "Master's thesis") + f", {f['school']}"
    if entry.type == "techreport":
        return ", ".join(p for p in ("Technical report", f.get("institution"), f.get("number")) if p)
    return f.get("howpublished") or (f"arXiv:{f['eprint']}" if "eprint" in f else "")


def reference(key: str, entry: Entry) -> str:
    f = fields(entry)
    title = f"*{f['title']}*" if entry.type == "book" else f["title"]
    persons = entry.persons.get("author") or entry.persons["editor"]
    parts = [f"{names(persons)} ({f['year']}).", f"{title}.", venue(entry, f), f.get("note", "")]
    text = " ".join(p if p.endswith(".") or not p else p + "." for p in parts if p)
    return f'<a id="{key}"></a>{text}'


def page() -> str:
    entries = parse_file(BIB).entries
    order = sorted(entries, key=lambda k: (first_author(entries[k]).lower().removeprefix("van den "),
                                           entries[k].fields["year"], k))  # fmt: skip
    return INTRO + "".join(f"\n{reference(key, entries[key])}\n" for key in order)


if __name__ == "__main__":
    PAGE.write_text(page())
    print(f"wrote {PAGE.relative_to(ROOT)}")
