"""PyMC-facing samplers that are not step methods (SMC over partitions with model evidence)."""

from pymc_splitmerge.sampling.smc import compare_evidence, sample_smc

__all__ = ["compare_evidence", "sample_smc"]
