<?php echo "Hello";
