<?php
echo "blog index";
