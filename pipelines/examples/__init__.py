"""The demo and the example data the package ships (a SIPP-like panel, public tables)."""
