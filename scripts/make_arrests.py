"""Write the Toronto arrests for marijuana possession as a small CSV to ``dlnotes/datafiles``.

Source:  the data frame ``Arrests`` of the R package carData (Fox, Weisberg and
         Price), installed by the Debian package ``r-cran-cardata``: arrests
         for simple possession of small quantities of marijuana in Toronto,
         1997-2002, from a Toronto Star investigation of police treatment of
         Black and White arrestees. It sits in R's lazy-load database
         /usr/lib/R/site-library/carData/data/Rdata.{rdx,rdb}, read as in
         scripts/make_novel.py with the PyPI package ``rdata``.
Licence: carData, data included, is distributed under the GPL (>= 2).
Output:  5226 rows and the header
         released,black,year,age,female,employed,citizen,checks
         released (1 = released with a summons, 0 = held for a bail hearing),
         black (1 = Black, 0 = White, the protected attribute), year (1997-2002),
         age (years), female (1 = female), employed and citizen (1 = yes),
         checks (0-6: the number of police databases in which the arrestee's
         name appeared).
Rerun:   apt-get install r-cran-cardata && pip install rdata
         python scripts/make_arrests.py [--out PATH]
"""

import argparse
import os

from make_novel import read_lazyload

DATA_DB = "/usr/lib/R/site-library/carData/data/Rdata"
DEFAULT_OUT = os.path.join(os.path.dirname(__file__), "..", "dlnotes", "datafiles", "arrests.csv")
COLUMNS = ("released", "black", "year", "age", "female", "employed", "citizen", "checks")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=DATA_DB, help="the carData lazy-load database, without .rdx/.rdb")
    parser.add_argument("--out", default=DEFAULT_OUT, help="output .csv path")
    args = parser.parse_args(argv)

    frame = read_lazyload(args.db, "Arrests")
    yes = {"released": "Yes", "employed": "Yes", "citizen": "Yes"}
    rows = []
    for _, r in frame.iterrows():
        rows.append(
            (
                int(r["released"] == yes["released"]),
                int(r["colour"] == "Black"),
                int(r["year"]),
                int(r["age"]),
                int(r["sex"] == "Female"),
                int(r["employed"] == yes["employed"]),
                int(r["citizen"] == yes["citizen"]),
                int(r["checks"]),
            )
        )
    if len(rows) != 5226:
        raise ValueError(f"expected 5226 arrests, got {len(rows)}")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="ascii", newline="\n") as f:
        f.write(",".join(COLUMNS) + "\n")
        f.writelines(",".join(str(v) for v in row) + "\n" for row in rows)
    print(f"wrote {args.out}: {len(rows)} rows")


if __name__ == "__main__":
    main()
