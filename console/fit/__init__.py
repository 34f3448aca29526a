"""Pure arithmetic: the fit budget (weights + PLE + KV cache + reserve per card) and the KV-cache model. No I/O."""
