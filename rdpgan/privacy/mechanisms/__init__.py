"""DP mechanisms used by the product, one small module each.

- :mod:`.laplace`: Laplace mechanism (pure epsilon-DP counts and sums);
- :mod:`.gaussian`: Gaussian mechanism, classic and analytic (Balle & Wang 2018) calibration,
  and the noisy label histogram;
- :mod:`.exponential`: exponential mechanism and DP quantiles / column bounds (Smith 2011);
- :mod:`.bounded_laplace`: Laplace truncated to a public range (Holohan et al. 2018);
- :mod:`.staircase`: staircase mechanism (Geng & Viswanath 2016) and its bounded, local-DP
  variant.

Every function validates its parameters (ValueError) and takes an explicit
``rng: np.random.Generator``.
"""
