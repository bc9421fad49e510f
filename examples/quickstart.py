"""The README's minimal model: a DP mixture of bivariate normals with a random concentration.

Run with ``python examples/quickstart.py``.
"""

import numpy as np
import pymc as pm

import pymc_splitmerge as psm

y, truth = psm.datasets.gaussian_blobs(n=300, n_components=4, dim=2, seed=1)

with pm.Model() as model:
    alpha = pm.Gamma("alpha", 1.0, 1.0)
    z = psm.DirichletProcess("z", alpha=alpha, n=len(y))
    psm.ConjugateMixture(
        "y",
        partition=z,
        component=psm.NormalInverseWishart(mu0=y.mean(axis=0), kappa0=0.05, nu0=4.0, psi0=np.eye(2)),
        observed=y,
    )
    idata = pm.sample(step=[psm.SAMSStep(z, n_gibbs_sweeps=1), psm.ConcentrationGibbs(alpha)],
                      draws=500, tune=200, chains=2)

print(psm.summary(idata, model=model).to_string())
estimate = psm.point_estimate(idata)
print(f"{estimate.n_clusters} clusters; adjusted Rand index against the truth: "
      f"{psm.adjusted_rand_index(estimate.labels, truth):.3f}")
