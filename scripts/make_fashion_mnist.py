"""Build the small Fashion-MNIST subset shipped in ``dlnotes/datafiles``.

Source:  Fashion-MNIST by Zalando Research (https://github.com/zalandoresearch/fashion-mnist),
         read from the IDX ``.gz`` files installed by the Debian package
         ``dataset-fashion-mnist`` into /usr/share/datasets/fashion-mnist.
Licence: MIT (Debian: Expat), Copyright 2017 Zalando SE.
Subset:  the first 2000 images of each of the 10 classes in the training file
         (20000 images) and the first 400 of each class in the test file (4000
         images), kept in file order. Saved with ``np.savez_compressed`` as
         X_train (20000, 28, 28) uint8, y_train (20000,) uint8,
         X_test (4000, 28, 28) uint8, y_test (4000,) uint8.
Rerun:   apt-get install dataset-fashion-mnist
         python scripts/make_fashion_mnist.py [--source DIR] [--out PATH]
"""

import argparse
import gzip
import os
import struct

import numpy as np

DEFAULT_SOURCE = "/usr/share/datasets/fashion-mnist"
DEFAULT_OUT = os.path.join(
    os.path.dirname(__file__), "..", "dlnotes", "datafiles", "fashion_mnist_subset.npz"
)
MAGIC_LABELS, MAGIC_IMAGES = 2049, 2051  # IDX: 0x0000, ubyte (0x08), ndim


def read_idx(path, magic):
    """Read an IDX ubyte file (gzipped) and return it as a uint8 array."""
    if not os.path.exists(path):
        raise SystemExit(
            f"error: {path} not found; install it with "
            "`apt-get install dataset-fashion-mnist` or pass --source DIR"
        )
    with gzip.open(path, "rb") as f:
        data = f.read()
    found = struct.unpack(">I", data[:4])[0]
    if found != magic:
        raise ValueError(f"{path}: bad IDX magic number {found}, expected {magic}")
    ndim = magic & 0xFF
    shape = struct.unpack(f">{ndim}I", data[4 : 4 + 4 * ndim])
    array = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if array.size != int(np.prod(shape)):
        raise ValueError(f"{path}: expected {np.prod(shape)} values, found {array.size}")
    return array.reshape(shape)


def load_split(source, prefix):
    images = read_idx(os.path.join(source, f"{prefix}-images-idx3-ubyte.gz"), MAGIC_IMAGES)
    labels = read_idx(os.path.join(source, f"{prefix}-labels-idx1-ubyte.gz"), MAGIC_LABELS)
    if len(images) != len(labels):
        raise ValueError(f"{prefix}: {len(images)} images but {len(labels)} labels")
    return images, labels


def balanced_subset(images, labels, per_class):
    """First `per_class` examples of every class, returned in file order."""
    idx = np.sort(np.concatenate([np.flatnonzero(labels == c)[:per_class] for c in range(10)]))
    return images[idx], labels[idx]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=DEFAULT_SOURCE, help="folder with the IDX .gz files")
    parser.add_argument("--out", default=DEFAULT_OUT, help="output .npz path")
    args = parser.parse_args(argv)

    X_train, y_train = balanced_subset(*load_split(args.source, "train"), 2000)
    X_test, y_test = balanced_subset(*load_split(args.source, "t10k"), 400)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    np.savez_compressed(args.out, X_train=X_train, y_train=y_train, X_test=X_test, y_test=y_test)
    print(f"train: {X_train.shape} images, test: {X_test.shape} images")
    print(f"wrote {os.path.normpath(args.out)} ({os.path.getsize(args.out)} bytes)")


if __name__ == "__main__":
    main()
