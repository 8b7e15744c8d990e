"""Quality metrics of decoded frames against the originals: pixels (PSNR, MS-SSIM), ST-LPIPS,
person regions and seams, temporal consistency, CLEAR MOD with the benchmark's person
detector, FVD, decoder compute."""
