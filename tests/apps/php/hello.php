<?php
echo "hello:", getmypid();
