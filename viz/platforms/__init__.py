"""What each platform (cpu, tpu, gpu) gives, behind one seam."""
