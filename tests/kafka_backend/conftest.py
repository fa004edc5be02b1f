from backends import where as where
