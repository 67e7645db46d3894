"""DP mechanisms used by the product, one small module each."""
