"""Person detection: SSDLite-MobileNetV2 as a PyTorch module, converted from the TensorFlow
frozen graph without TensorFlow."""
